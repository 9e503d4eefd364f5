namespace * star.ns
namespace py star_py
struct StarThing { 1: i32 n }
