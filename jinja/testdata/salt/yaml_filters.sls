write_motd:
  local.file.write:
    - tgt: {{ data['id'] }}
    - arg:
      - /etc/motd
      - {{ data['motd']|yaml_dquote }}
    - kwarg:
        owner: {{ data['owner']|yaml_squote }}
        extra: {{ data['extra']|yaml }}
