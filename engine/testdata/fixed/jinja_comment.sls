{# nothing to print #}
r:
  local.test.ping:
    - tgt: web1
