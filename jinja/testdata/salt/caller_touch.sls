touch_marker:
  caller.file.touch:
    - args:
      - name: /var/run/salt-{{ data['stage']|default('none') }}.marker
