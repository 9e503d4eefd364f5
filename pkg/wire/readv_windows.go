package wire

import "syscall"

// rawReads: a socket's handle is not read directly on Windows (overlapped
// I/O through the runtime's poller only), so there is no SpinReader: every
// read parks in the poller, as on a TLS connection.
const rawReads = false

func readv2(int, []byte, []byte) (int, error) { return 0, syscall.EWINDOWS }

func rawRead(uintptr, []byte) (int, error) { return 0, syscall.EWINDOWS }
