package llmctl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// replaceBinary puts newBin at bin atomically: written beside it, synced,
// then renamed over it; the old binary is copied to bin.previous first.
// The running process keeps its old file (the rename leaves it without a
// name), so restarting it runs the new one from the same path.
func replaceBinary(bin string, newBin []byte) error {
	fi, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("upgrade: the binary to replace: %w", err)
	}
	tmp, err := writeBeside(bin, ".upgrade", fi.Mode().Perm(), func(w io.Writer) error {
		_, err := w.Write(newBin)
		return err
	})
	if err != nil {
		return err
	}
	if err := copyFile(bin, bin+".previous", fi.Mode().Perm()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return writeErr(bin, err)
	}
	return syncDir(filepath.Dir(bin))
}

// rollbackBinary swaps bin and bin.previous.
func rollbackBinary(bin string) error {
	prev := bin + ".previous"
	fi, err := os.Stat(prev)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("upgrade: --rollback: no %s to go back to (llmgw upgrade keeps the binary it replaces there)", prev)
	}
	if err != nil {
		return fmt.Errorf("upgrade: --rollback: %w", err)
	}
	tmp, err := writeBeside(bin, ".rollback", fi.Mode().Perm(), func(w io.Writer) error {
		return copyInto(w, bin)
	})
	if err != nil {
		return err
	}
	if err := os.Rename(prev, bin); err != nil {
		os.Remove(tmp)
		return writeErr(bin, err)
	}
	if err := os.Rename(tmp, prev); err != nil {
		return fmt.Errorf("upgrade: --rollback: %s is back, but keeping the binary it replaced as %s failed (%w); that binary is at %s", bin, prev, err, tmp)
	}
	return syncDir(filepath.Dir(bin))
}

// copyFile copies src to dst through a synced file renamed into place.
func copyFile(src, dst string, mode fs.FileMode) error {
	tmp, err := writeBeside(dst, ".tmp", mode, func(w io.Writer) error { return copyInto(w, src) })
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return writeErr(dst, err)
	}
	return nil
}

func copyInto(w io.Writer, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// writeBeside writes a new file next to path (path + suffix + random),
// with mode, synced and closed, and returns its name.
func writeBeside(path, suffix string, mode fs.FileMode, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+suffix+"-*")
	if err != nil {
		return "", writeErr(path, err)
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", writeErr(path, err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // the rename is done; a directory that cannot be opened cannot be synced either
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}

// writeErr says what to do when the binary's directory is not writable.
func writeErr(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("upgrade: no permission to write beside %s (%v): run with sudo, or as the user that owns it; nothing was changed", path, err)
	}
	return fmt.Errorf("upgrade: writing beside %s: %w", path, err)
}
