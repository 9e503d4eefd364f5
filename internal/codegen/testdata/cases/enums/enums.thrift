namespace go enums

/** Colors with explicit and implied values. */
enum Color {
  RED,
  GREEN = 5,
  BLUE,
  /** Negative values are legal. */
  BLACK = -1
}

enum Empty {}

struct Palette {
  1: Color primary = Color.GREEN,
  2: optional Color secondary,
  3: list<Color> all,
  4: map<Color, string> names,
  5: optional Color tertiary = Color.BLUE,
}
