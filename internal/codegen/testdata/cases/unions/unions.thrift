namespace go unions

struct Inner { 1: string s }

union Value {
  1: i32 int_value,
  2: string string_value,
  3: list<i64> list_value,
  4: Inner inner,
  5: binary raw,
  6: double dbl,
}

struct Holder {
  1: Value value,
  2: optional Value maybe,
}
