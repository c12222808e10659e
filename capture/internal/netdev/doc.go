// Package netdev asks the kernel about a network interface by name: its
// index, and how many receive queues it has. The live capture packages use
// it before they open sockets, so that a missing interface or queue gets a
// plain error instead of the one a later system call would give.
//
// Every answer comes from the network namespace of the calling thread, as
// the capture sockets do (sysfs shows the namespace it was mounted in
// instead). Functions are safe for concurrent use; none is meant for a hot
// path.
package netdev
