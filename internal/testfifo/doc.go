// Package testfifo makes named pipes (FIFOs) for the tests that check that
// a FIFO named like an input is refused, not opened: opening one blocks
// until a writer comes. It is a test kit: nothing outside tests uses it.
package testfifo
