enum MyEnum1 { ME1_0 = 0 }
enum MyEnum2 { ME2_0 = 0, ME2_2 = 2 }
struct S {
  1: MyEnum2 x = MyEnum1.ME2_2
  2: i8 i8
}
