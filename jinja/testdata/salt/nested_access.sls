{# job events forwarded by a minion: data.data holds the inner event #}
{% set inner = data.data %}
{% if inner.fun is defined and inner.fun == 'state.apply' and inner['fun_args']|length > 0 %}
fwd_{{ inner.id }}:
  local.state.apply:
    - tgt: {{ inner.id }}
    - arg:
      - {{ inner['fun_args'][0] }}
    - kwarg:
        saltenv: {{ inner.get('saltenv', 'base') }}
        args: {{ inner['fun_args'] }}
{% endif %}
