struct Extra {
  1: bool flag = false
}
