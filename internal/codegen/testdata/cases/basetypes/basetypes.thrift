namespace go basetypes

/** Every Thrift base type. */
struct AllBase {
  1: bool a_bool,
  2: byte a_byte,
  3: i8 an_i8,
  4: i16 an_i16,
  5: i32 an_i32,
  6: i64 an_i64,
  7: double a_double,
  8: string a_string,
  9: binary a_binary,
  10: uuid a_uuid,
}

struct OptionalBase {
  1: optional bool a_bool,
  2: optional byte a_byte,
  3: optional i16 an_i16,
  4: optional i32 an_i32,
  5: optional i64 an_i64,
  6: optional double a_double,
  7: optional string a_string,
  8: optional binary a_binary,
  9: optional uuid a_uuid,
}
