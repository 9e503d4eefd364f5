struct Legacy {
  i32 no_id
}
