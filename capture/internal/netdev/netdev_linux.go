package netdev

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocescope/rocescope/capture"
)

// Index returns the index of the interface called name. When there is none
// the error is a *capture.InterfaceError wrapping
// capture.ErrInterfaceNotFound ("capture: interface NAME not found").
func Index(name string) (int, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil { // longer than IFNAMSIZ-1 bytes or holds a NUL: no such interface
		return 0, &capture.InterfaceError{Iface: name, Err: capture.ErrInterfaceNotFound}
	}
	fd, err := socket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	switch err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); {
	case errors.Is(err, unix.ENODEV):
		return 0, &capture.InterfaceError{Iface: name, Err: capture.ErrInterfaceNotFound}
	case err != nil:
		return 0, &capture.InterfaceError{Iface: name, Err: fmt.Errorf("SIOCGIFINDEX: %w", err)}
	}
	return int(ifr.Uint32()), nil
}

// ErrQueuesUnknown is returned by RXQueues when neither the driver nor
// sysfs tells the number of receive queues.
var ErrQueuesUnknown = errors.New("netdev: receive queue count unknown")

// ethtoolChannels is struct ethtool_channels (linux/ethtool.h).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRx, MaxTx, MaxOther, MaxCombined         uint32
	RxCount, TxCount, OtherCount, CombinedCount uint32
}

// ifreqData is struct ifreq with a pointer in its union, as SIOCETHTOOL
// takes it (40 bytes on 64-bit systems).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// RXQueues returns the number of receive queues of the interface called
// name, the queues an AF_XDP socket can bind to: the driver's receive-only
// plus combined channels (ETHTOOL_GCHANNELS). For a driver that does not
// report channels it counts /sys/class/net/NAME/queues/rx-*, when sysfs
// lists the interface and has the same index for it (sysfs may show
// another namespace); otherwise it returns ErrQueuesUnknown.
func RXQueues(name string) (int, error) {
	index, err := Index(name)
	if err != nil {
		return 0, err
	}
	fd, err := socket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ch := &ethtoolChannels{Cmd: unix.ETHTOOL_GCHANNELS}
	var ifr ifreqData
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(ch)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	switch {
	case e == 0 && ch.RxCount+ch.CombinedCount > 0:
		return int(ch.RxCount + ch.CombinedCount), nil
	case e == 0, e == unix.EOPNOTSUPP:
		return sysfsQueues(name, index)
	case e == unix.ENODEV:
		return 0, &capture.InterfaceError{Iface: name, Err: capture.ErrInterfaceNotFound}
	}
	return 0, &capture.InterfaceError{Iface: name, Err: fmt.Errorf("ETHTOOL_GCHANNELS: %w", e)}
}

// sysfsQueues counts the rx-* queues sysfs lists for name, if sysfs has
// the interface under the same index.
func sysfsQueues(name string, index int) (int, error) {
	dir := filepath.Join("/sys/class/net", name)
	b, err := os.ReadFile(filepath.Join(dir, "ifindex"))
	if err != nil {
		return 0, ErrQueuesUnknown
	}
	if got, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || got != index {
		return 0, ErrQueuesUnknown
	}
	rx, _ := filepath.Glob(filepath.Join(dir, "queues", "rx-*"))
	if len(rx) == 0 {
		return 0, ErrQueuesUnknown
	}
	return len(rx), nil
}

// socket opens a socket to make interface ioctls on: any socket in the
// thread's network namespace will do.
func socket() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netdev: socket for interface ioctls: %w", err)
	}
	return fd, nil
}

// Link is what the capture modes need to know of an interface besides its
// index.
type Link struct {
	MTU    int              // the interface's MTU
	MAC    net.HardwareAddr // its hardware address (nil for none)
	Driver string           // the driver's name as ethtool -i shows it ("" when it does not say)
}

// LinkOf returns the MTU, hardware address and driver of the interface
// called name.
func LinkOf(name string) (Link, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return Link{}, &capture.InterfaceError{Iface: name, Err: err}
	}
	l := Link{MTU: ifi.MTU, MAC: ifi.HardwareAddr}
	fd, err := socket()
	if err != nil {
		return l, err
	}
	defer unix.Close(fd)
	if info, err := unix.IoctlGetEthtoolDrvinfo(fd, name); err == nil {
		l.Driver = unix.ByteSliceToString(info.Driver[:])
	}
	return l, nil
}
