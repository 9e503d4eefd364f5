package hatkv

import "github.com/hatrpc/hatrpc/internal/hatkv/kvstore"

// Store is the server's store, for serving it by other means too (the
// protocol emulations of internal/hatkv/emul). It is closed by Shutdown.
func (s *Server) Store() *kvstore.Store { return s.store }
