namespace go base.shared

struct SharedStruct {
  1: i32 key,
  2: string value,
}

enum Mode { ON = 1, OFF = 2 }

typedef list<SharedStruct> SharedList

const i32 SHARED_MAX = 3
