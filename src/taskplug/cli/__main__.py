from taskplug.cli import main

main()
