package server

// Calls that run beside each other (the FLOCK session's on the FLOCK workers,
// a TCP connection's) reuse generated call values (Method.NewCall: the
// arguments and the result, allocated together) through their method's
// pool, as a dedicated lane reuses its last call's: no allocation per
// call for a handler that allocates nothing itself. Not with
// interceptors, which may keep arguments and results.

// takeCall gives r a reset call value of its method from the pool, if
// it runs one and the pool has one.
func (c *conn) takeCall(r *request) {
	m := r.m
	if r.args != nil || m.m.NewCall == nil || m.m.HandleCall == nil || len(c.s.opts.interceptors) > 0 {
		return
	}
	if v := m.calls.Get(); v != nil {
		r.args, r.call = m.m.NewCall(v)
	}
}

// takeCallKept is takeCall for a serving turn, which first looks at the
// call value its last call of the same method left (putCallKept): a
// burst of calls of one method then takes no value from the pool.
func (c *conn) takeCallKept(r *request, k *kit) {
	if k.call != nil && k.callOf == r.m && r.args == nil && len(c.s.opts.interceptors) == 0 {
		r.args, r.call = r.m.m.NewCall(k.call)
		k.call, k.callOf = nil, nil
		return
	}
	c.takeCall(r)
}

// putCallKept is putCall for a serving turn: call, reset, stays with k
// for the turn's next call (k.done pools it) unless k holds one.
func (c *conn) putCallKept(m *method, call any, k *kit) {
	if call == nil || len(c.s.opts.interceptors) > 0 {
		return
	}
	if k.call != nil {
		c.putCall(m, call)
		return
	}
	_, k.call = m.m.NewCall(call)
	k.callOf = m
}

// putCall resets call, whose reply is encoded, and pools it: it holds
// nothing of its call from here on.
func (c *conn) putCall(m *method, call any) {
	if call == nil || len(c.s.opts.interceptors) > 0 {
		return
	}
	_, call = m.m.NewCall(call)
	m.calls.Put(call)
}
