{
  "targets": [
    {
      "target_name": "linuxsys",
      "sources": ["linuxsys.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
