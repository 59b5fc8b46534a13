package release

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"golang.org/x/crypto/blake2b"
)

// A minisign secret key file holds, in base64 on its second line: "Ed",
// the KDF ("Sc" for scrypt, two zero bytes for none), "B2", a 32-byte
// salt, 8+8 bytes of KDF limits, then the key id, the 64-byte Ed25519
// key and a BLAKE2b-256 checksum of "Ed", the id and the key (those 104
// bytes XORed with the scrypt stream when encrypted). This package reads
// and writes unencrypted ones (minisign -G -W): keep the file as you
// would keep a password.
const (
	skLen     = 2 + 2 + 2 + 32 + 8 + 8 + 8 + 64 + 32
	skKeyNum  = 2 + 2 + 2 + 32 + 8 + 8
	kdfNone   = "\x00\x00"
	chkBlake2 = "B2"
)

// MarshalSecretKey is the content of an unencrypted minisign secret key
// file, which minisign -S -s also reads.
func MarshalSecretKey(sk SecretKey) []byte {
	b := make([]byte, 0, skLen)
	b = append(append(append(b, algEd...), kdfNone...), chkBlake2...)
	b = append(b, make([]byte, 32+8+8)...)
	b = append(append(b, sk.ID[:]...), sk.Key...)
	b = append(b, secretChecksum(sk)...)
	return []byte("untrusted comment: minisign secret key " + sk.ID.String() + " (unencrypted)\n" +
		base64.StdEncoding.EncodeToString(b) + "\n")
}

// ParseSecretKey reads an unencrypted minisign secret key file.
func ParseSecretKey(text []byte) (SecretKey, error) {
	b, err := base64.StdEncoding.DecodeString(lastLine(string(text)))
	if err != nil || len(b) != skLen || string(b[:2]) != algEd || string(b[4:6]) != chkBlake2 {
		return SecretKey{}, fmt.Errorf("reading a minisign secret key: not one (a comment line, then the base64 of an Ed25519 secret key)")
	}
	if string(b[2:4]) != kdfNone {
		return SecretKey{}, fmt.Errorf("reading a minisign secret key: it is encrypted with a password; make an unencrypted one (minisign -G -W) for unattended signing")
	}
	var sk SecretKey
	copy(sk.ID[:], b[skKeyNum:skKeyNum+8])
	sk.Key = ed25519.PrivateKey(bytes.Clone(b[skKeyNum+8 : skKeyNum+8+64]))
	if !bytes.Equal(b[skKeyNum+72:], secretChecksum(sk)) {
		return SecretKey{}, fmt.Errorf("reading a minisign secret key: its checksum does not match (the file is damaged)")
	}
	return sk, nil
}

func secretChecksum(sk SecretKey) []byte {
	h, _ := blake2b.New256(nil) // no key: never fails
	h.Write([]byte(algEd))
	h.Write(sk.ID[:])
	h.Write(sk.Key)
	return h.Sum(nil)
}
