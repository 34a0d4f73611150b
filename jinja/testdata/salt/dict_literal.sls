{% set meta = {'zone': data['zone'], 'app': data['app'], 'build': data['build']} %}
{% set opts = {'retry': 3} %}
{% do opts.update({'backoff': data.get('backoff', 1)}) %}
label_{{ data['app'] }}:
  local.grains.setval:
    - tgt: {{ data['id'] }}
    - arg:
      - meta
      - "{{ meta }}"
    - kwarg:
        pairs: '{% for k, v in meta.items() %}{{ k }}={{ v }};{% endfor %}'
        keys: '{% for k in meta %}{{ k }},{% endfor %}'
        zone: {{ meta['zone'] }}
        json: '{{ meta|json }}'
        tojson: '{{ meta|tojson }}'
        opts: "{{ opts }}"
