namespace go shared

struct Tag {
  1: string key,
  2: string value,
}

exception Oops {
  1: string why,
  2: i32 code,
}

service Base {
  string version(),
}
