#!gotmpl|yaml
{{- if and (not (dig "success" true .data)) (ne (dig "fun" "" .data) "saltutil.find_job") }}
notify_failure:
  runner.event.send:
    - args:
      - tag: myco/alert/job_failed
      - data:
          minion: {{ .data.id }}
          jid: '{{ .data.jid }}'
          fun: {{ .data.fun }}
          retcode: {{ dig "retcode" 1 .data }}
{{- end }}
