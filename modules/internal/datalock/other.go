//go:build !unix

package datalock

// Without flock the data directory is not locked.
func Take(dir string) error { return nil }

// Release does nothing without flock.
func Release(dir string) {}
