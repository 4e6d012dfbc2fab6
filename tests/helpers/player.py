"""A fake player that finds no audio device (as ffplay says it): test_player.py, test_say_stream.py."""

NO_DEVICE = (
    "import sys\n"
    "sys.stdin.buffer.read()\n"
    'sys.stderr.write("SDL_OpenAudio (1 channels, 24000 Hz): ALSA: Couldn\'t open audio device: No such file\\n")\n'
    "sys.stderr.write('No more combinations to try, audio open failed\\n')\n"
)
