r:
  local.test.ping:
    - tgt: [web1, web2
