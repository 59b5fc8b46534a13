// Command releasesign is the release script's signer (scripts/release
// runs it); it is not part of llmgw. It writes minisign-compatible keys
// and signatures (release):
//
//	go run ./scripts/releasesign keygen SECRET_FILE PUBLIC_FILE
//	go run ./scripts/releasesign sign SECRET_FILE FILE TRUSTED_COMMENT
//	go run ./scripts/releasesign verify PUBLIC_FILE FILE
//
// sign writes FILE.minisig. Ed25519 signatures are deterministic: the
// same key, file and comment give the same bytes.
package main

import (
	"fmt"
	"os"

	"github.com/llmgw/llmgw/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "releasesign:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "keygen":
		return keygen(args[1], args[2])
	case len(args) == 4 && args[0] == "sign":
		return sign(args[1], args[2], args[3])
	case len(args) == 3 && args[0] == "verify":
		return verify(args[1], args[2])
	}
	return fmt.Errorf("usage: releasesign keygen SECRET PUBLIC | sign SECRET FILE TRUSTED_COMMENT | verify PUBLIC FILE")
}

func keygen(secretPath, publicPath string) error {
	sk, err := release.GenerateKey(nil)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(secretPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the secret key: %w (an existing key is never overwritten)", err)
	}
	if _, err := f.Write(release.MarshalSecretKey(sk)); err != nil {
		f.Close()
		return fmt.Errorf("writing the secret key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the secret key: %w", err)
	}
	return os.WriteFile(publicPath, sk.Public().MarshalText(), 0o644)
}

func sign(secretPath, path, comment string) error {
	text, err := os.ReadFile(secretPath)
	if err != nil {
		return fmt.Errorf("reading the secret key: %w", err)
	}
	sk, err := release.ParseSecretKey(text)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path+".minisig", release.Sign(sk, data, comment).MarshalText(), 0o644)
}

func verify(publicPath, path string) error {
	text, err := os.ReadFile(publicPath)
	if err != nil {
		return err
	}
	pk, err := release.ParsePublicKey(string(text))
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	st, err := os.ReadFile(path + ".minisig")
	if err != nil {
		return err
	}
	sig, err := release.ParseSignature(st)
	if err != nil {
		return err
	}
	if err := release.Verify(data, sig, pk); err != nil {
		return err
	}
	fmt.Println("signature and comment signature verified; trusted comment:", sig.TrustedComment)
	return nil
}
