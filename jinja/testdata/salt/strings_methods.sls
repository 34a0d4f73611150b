{% set name = data['name']|lower|replace(' ', '-') %}
{% if name.startswith('web') or name.endswith('-api') %}
user_{{ name }}:
  wheel.key.accept:
    - args:
      - match: {{ name }}
    - kwarg:
        upper: {{ data['name']|upper }}
        stripped: '{{ data['note'].strip() }}'
        parts: {{ data['name'].split()|length }}
        first_word: {{ data['name'].split()[0] }}
        count: {{ data['tags']|length }}
        tags: '{{ data['tags']|join(", ") }}'
        first_tag: {{ data['tags']|first|default('none') }}
{% endif %}
