from fsdp_skill.console import main

if __name__ == "__main__":
    main()
