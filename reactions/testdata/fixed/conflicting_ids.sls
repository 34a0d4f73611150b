a:
  local.test.ping:
    - tgt: web1
a:
  local.test.ping:
    - tgt: web2
