//go:build !unix

package main

import "os"

// windowWidth returns 0: the width is unknown off Unix.
func windowWidth(*os.File) int { return 0 }
