{
  "targets": [
    {
      "target_name": "walk",
      "sources": ["native/walk.c", "native/trim.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"]
    }
  ]
}
