notify_{{ data['id'] }}:
  local.cmd.run:
    - tgt: monitor
    - arg:
      - "echo {{ data['fun_args'] }}"
    - kwarg:
        args_text: "{{ data['fun_args'] }}"
        info: "{{ data['info'] }}"
