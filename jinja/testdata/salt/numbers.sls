{% set n = data['count'] %}
scale_{{ data['group'] }}:
  runner.cloud.scale:
    - kwarg:
        next: {{ n + 1 }}
        prev: {{ n - 1 }}
        double: {{ n * 2 }}
        half: {{ n / 2 }}
        floor: {{ n // 2 }}
        rem: {{ n % 3 }}
        neg: {{ -n }}
        as_int: {{ data['size']|int }}
        as_float: {{ data['size']|float }}
        pct: '{{ (n * 100 / data['total'])|round(1) }}'
