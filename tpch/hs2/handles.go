package hs2

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// ErrInvalidHandle is what a call naming an unknown, closed or forged
// session or operation handle fails with.
var ErrInvalidHandle = errors.New("hs2: invalid handle")

// handleKey names a session or operation in the server's maps: the
// handle's public guid. The secret is checked against the stored one, so
// a guid seen in a log is not enough to use someone else's handle.
type handleKey string

func newHandleID() *tcli.THandleIdentifier {
	guid, secret := make([]byte, 16), make([]byte, 16)
	_, _ = rand.Read(guid) // crypto/rand.Read never fails (Go 1.24+)
	_, _ = rand.Read(secret)
	return &tcli.THandleIdentifier{GUID: guid, Secret: secret}
}

func keyOf(id *tcli.THandleIdentifier) (handleKey, bool) {
	if id == nil || len(id.GUID) != 16 {
		return "", false
	}
	return handleKey(id.GUID), true
}

func sameSecret(stored, given *tcli.THandleIdentifier) bool {
	return given != nil && subtle.ConstantTimeCompare(stored.Secret, given.Secret) == 1
}
