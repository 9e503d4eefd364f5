service Bad {
  hint: perf_goal=speed;
  void f() [c_hint: no_such_key=1;],
}

service Bad2 {
  s_hint: rfp_retries=3;
  void g(),
}
