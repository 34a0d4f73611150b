{# A value pasted into a single-quoted scalar: Salt's YAML breaks (or
   changes shape) when the value holds a quote; reactord keeps it one
   string, on purpose (README: event data cannot change a reaction's
   structure). #}
note_{{ data['id'] }}:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - arg:
      - 'echo {{ data['msg'] }}'
