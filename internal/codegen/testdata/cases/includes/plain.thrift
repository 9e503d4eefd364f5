// No namespace: the package is named after the file.
struct PlainThing { 1: i32 n }
