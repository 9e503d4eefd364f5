package server

// ShuttingDown reports whether Shutdown or Close has begun: status
// services (pkg/fb303) answer STOPPING from then on, so a load balancer
// polling them drains the server before its listeners are gone.
func (s *Server) ShuttingDown() bool { return s.shutting.Load() }
