{#- {% raw %} passes Jinja through to what runs later: a command's
    template, an orchestration's pillar. Its text is the file's own. -#}
notify_{{ data.id }}:
  local.cmd.run:
    - tgt: {{ data.id }}
    - arg:
      - 'echo {% raw %}{{ grains.id }} {% if 1 %}{# c #}{% endraw %}'
      - "{% raw %}{{{% endraw %}{{ data.x }}{% raw %}}}{% endraw %}"
      - run {%- raw %} {{ plain }} {%+ endraw -%}   and more
{%- raw %}
    - kwarg:
        template: |
          {% for m in minions %}
          {{ m }}
          {%- endfor %}
{%- endraw %}
        id: {{ data.id }}
# {% raw -%}
{%- if data.go %} a YAML comment
{%- endraw %}
shape:
  runner.test.arg:
    - args: {% raw %}[a, {b: c}, '{{ x }}']{% endraw %}
    - kwarg: {% raw %}{{% endraw %}k: {{ data.id }}{% raw %}}{% endraw %}
