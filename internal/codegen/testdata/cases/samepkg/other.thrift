namespace go same.pkg

struct OtherThing { 1: map<list<i32>, i32> odd }
typedef OtherThing Alias
