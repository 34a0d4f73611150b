rerun_{{ data['id'] }}:
  local.{{ data['fun'] }}:
    - tgt: {{ data['id'] }}
    - arg: {{ data['fun_args'] }}
    - kwarg: {{ data['kwargs'] }}
