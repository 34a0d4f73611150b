#!yaml
r:
  local.test.ping:
    - tgt: web1
   oops: x
