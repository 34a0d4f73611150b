{% if data['fun'] == 'state.highstate' %}
  {% if data['return'] is mapping %}
    {% set failed = data['return'].values()|selectattr('result', 'sameas', false)|list %}
    {% if failed|length > 0 %}
highstate_failed_{{ data['id'] }}:
  local.event.send:
    - tgt: {{ data['id'] }}
    - arg:
      - highstate/failed
    - kwarg:
        data:
          count: {{ failed|length }}
          names: {{ failed|map(attribute='name')|list }}
    {% endif %}
  {% elif data['return'] is string %}
highstate_error_{{ data['id'] }}:
  local.event.send:
    - tgt: {{ data['id'] }}
    - arg:
      - highstate/error
    - kwarg:
        data:
          message: {{ data['return']|yaml_dquote }}
  {% endif %}
{% endif %}
