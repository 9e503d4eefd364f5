package server

// StreamState sums the stream state of s's connections: streams open and
// bytes received and not yet consumed by their handlers.
func StreamState(s *Server) (streams int, buffered int64) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		st := c.st
		c.mu.Unlock()
		if st != nil {
			streams += st.Len()
			buffered += st.Buffered()
		}
	}
	return streams, buffered
}
