// Benchmark and fuzz workloads of pkg/proto; workloads_gen_test.go holds
// hatgen's output for this file (encode/decode methods only).

// YCSB record as a map.
struct YCSBMap {
  1: string key,
  2: map<string,binary> fields,
}

// YCSB record as a list of values.
struct YCSBList {
  1: string key,
  2: list<binary> values,
}

struct I64List {
  1: list<i64> values,
}

// 20 mixed scalar fields.
struct Mixed {
  1: bool b1, 2: bool b2, 3: i8 i8a, 4: i8 i8b, 5: i16 i16a, 6: i16 i16b,
  7: i32 i32a, 8: i32 i32b, 9: i32 i32c, 10: i32 i32d,
  11: i64 i64a, 12: i64 i64b, 13: i64 i64c, 14: i64 i64d, 15: i64 i64e,
  16: double d1, 17: double d2, 18: double d3, 19: double d4, 20: bool b3,
}
