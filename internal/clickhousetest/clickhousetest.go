// Package clickhousetest starts a clickhouse-server for tests: on
// 127.0.0.1, on ports it picks, with every file under the test's temporary
// directory, stopped when the test ends.
package clickhousetest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocescope/rocescope/internal/freeport"
)

// binaries are where Debian and the upstream packages put the server.
var binaries = [][]string{
	{"clickhouse-server"}, {"/usr/sbin/clickhouse-server"}, {"/usr/bin/clickhouse-server"}, {"clickhouse", "server"},
}

// Start starts a server and returns the host:port of its HTTP interface.
// It skips the test when no server is installed.
func Start(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a clickhouse-server: not with -short (CI runs it)")
	}
	var cmd []string
	for _, b := range binaries {
		if p, err := exec.LookPath(b[0]); err == nil {
			cmd = append([]string{p}, b[1:]...)
			break
		}
	}
	if cmd == nil {
		tb.Skip("clickhouse-server is not installed")
	}
	dir := tb.TempDir()
	httpPort, tcpPort := freeport.Pick(tb), freeport.Pick(tb)
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger><level>information</level><log>%[1]s/server.log</log><errorlog>%[1]s/server.err.log</errorlog><console>0</console></logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>%[2]d</http_port>
    <tcp_port>%[3]d</tcp_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709120</mark_cache_size>
</yandex>
`, dir, httpPort, tcpPort)
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</yandex>
`
	for name, text := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	c := exec.Command(cmd[0], append(cmd[1:], "--config-file="+filepath.Join(dir, "config.xml"))...)
	c.Dir, c.Stdout, c.Stderr = dir, out, out
	if err := c.Start(); err != nil {
		tb.Skipf("clickhouse-server does not start: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	tb.Cleanup(func() {
		c.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			c.Process.Kill()
			<-exited
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ok, _ := Query(addr, "", "/ping"); strings.TrimSpace(ok) == "Ok." {
			return addr
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.err.log"))
			tb.Fatalf("clickhouse-server exited: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("clickhouse-server on %s does not answer /ping", addr)
		}
	}
}

// Query posts query to the server's HTTP interface at path ("/" if empty)
// and returns the answer. An empty query is a GET.
func Query(addr, query, path string) (string, error) {
	if path == "" {
		path = "/"
	}
	var resp *http.Response
	var err error
	if query == "" {
		resp, err = http.Get("http://" + addr + path)
	} else {
		resp, err = http.Post("http://"+addr+path, "text/plain", strings.NewReader(query))
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("clickhouse %s: %s: %s", addr, resp.Status, b)
	}
	return string(b), err
}
