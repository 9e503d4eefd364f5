struct Common {
  1: string name
}
