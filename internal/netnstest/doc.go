// Package netnstest is the test kit for live capture tests: it builds a pair
// of network namespaces joined by a veth pair, runs code inside either
// namespace, injects raw Ethernet frames from one side, and makes
// deterministic RoCE and non-RoCE test traffic.
//
// It is imported only by the _test.go files of the capture packages and of
// cmd/rocescope. Everything that touches the kernel needs root and is gated
// by [Skip]: such tests run only when ROCESCOPE_LIVE=1 is set. Traffic never
// leaves the two namespaces, and every namespace is deleted by a
// t.Cleanup, also when the test fails or panics.
//
// # Lifetime and concurrency
//
// A [Pair] belongs to one test. [Pair.Do] locks the calling goroutine to its
// OS thread while it runs and switches only that thread, so Do may be called
// from several goroutines at once; sockets opened inside keep their
// namespace after Do returns.
package netnstest
