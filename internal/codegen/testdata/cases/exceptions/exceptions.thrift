namespace go exceptions

exception NotFound {
  1: string message,
  2: i64 id,
}

exception Invalid {
  1: required string reason,
  2: optional list<string> fields,
}

exception Empty {}

service Store {
  string get(1: i64 id) throws (1: NotFound nf),
  void put(1: i64 id, 2: string v) throws (1: Invalid bad, 2: NotFound nf),
  void clear() throws (1: Empty e),
}
