report_{{ data['id'] }}:
  local.event.send:
    - tgt: {{ data['id'] }}
    - arg:
      - 'report/{{ data['id'] }}'
    - kwarg:
        flag: {{ data['flag'] }}
        value: {{ data['value'] }}
        quoted: '{{ data['value'] }}'
        text: "value={{ data['value'] }} flag={{ data['flag'] }}"
