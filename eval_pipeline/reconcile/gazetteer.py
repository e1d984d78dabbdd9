"""A small, hand-written gazetteer: names whose type is obvious without context.

Deliberately short. It types the names a chat about daily life mentions most (countries, big
cities, well-known companies and products, common first names); anything else found by the
capitalisation rules is kept with type `other` rather than guessed. Entries are normalised
(`normalise_name`) before lookup, so case and spacing do not matter.
"""

from __future__ import annotations

from eval_pipeline.reconcile.models import normalise_name


def _names(text: str) -> frozenset[str]:
    return frozenset(normalise_name(n) for n in text.split(";") if n.strip())


PLACES = _names(
    # continents, regions
    "Africa;Asia;Europe;North America;South America;Latin America;Antarctica;Australia;"
    "Middle East;Scandinavia;Caribbean;Mediterranean;Southeast Asia;"
    # countries
    "United States;USA;US;U.S;America;United Kingdom;UK;England;Scotland;Wales;Ireland;Canada;"
    "Mexico;Brazil;Argentina;Chile;Peru;Colombia;France;Germany;Spain;Portugal;Italy;Greece;"
    "Netherlands;Belgium;Switzerland;Austria;Sweden;Norway;Denmark;Finland;Iceland;Poland;"
    "Czech Republic;Hungary;Croatia;Turkey;Egypt;Morocco;Kenya;South Africa;Nigeria;Israel;"
    "India;China;Japan;Korea;South Korea;Thailand;Vietnam;Indonesia;Philippines;Singapore;"
    "Malaysia;New Zealand;Russia;Ukraine;Dubai;"
    # cities
    "New York;New York City;NYC;Los Angeles;LA;San Francisco;Chicago;Boston;Seattle;Portland;"
    "Austin;Denver;Miami;Atlanta;Houston;Dallas;Philadelphia;Washington;Washington D.C;"
    "Las Vegas;San Diego;Nashville;New Orleans;Orlando;Honolulu;Toronto;Vancouver;Montreal;"
    "London;Paris;Berlin;Munich;Madrid;Barcelona;Lisbon;Rome;Milan;Florence;Venice;Athens;"
    "Amsterdam;Brussels;Vienna;Prague;Budapest;Zurich;Geneva;Copenhagen;Stockholm;Oslo;"
    "Dublin;Edinburgh;Istanbul;Cairo;Tokyo;Kyoto;Osaka;Seoul;Beijing;Shanghai;Hong Kong;"
    "Bangkok;Bali;Sydney;Melbourne;Auckland;Mumbai;Delhi;Bangalore;Mexico City;Cancun;"
    "Rio de Janeiro;São Paulo;Buenos Aires;Cape Town;Reykjavik;Zürich;Kraków;Malmö;"
    # US states and well-known places
    "California;Texas;Florida;Hawaii;Alaska;Colorado;Oregon;Arizona;Nevada;Utah;Georgia;"
    "Massachusetts;Michigan;Ohio;Illinois;Virginia;North Carolina;Tennessee;"
    "Yellowstone;Yosemite;Grand Canyon;Central Park;Disneyland;Disney World;Times Square"
)

ORGANISATIONS = _names(
    "Google;Alphabet;Microsoft;Apple Inc;Amazon;Meta;Facebook;Netflix;Spotify;Uber;Lyft;Airbnb;"
    "Tesla;SpaceX;IBM;Intel;Nvidia;OpenAI;Samsung;Sony;Nintendo;Toyota;Honda;Ford;BMW;"
    "Starbucks;McDonald's;Walmart;Target;Costco;IKEA;Trader Joe's;Whole Foods;Home Depot;"
    "Best Buy;Nike;Adidas;Zara;H&M;Sephora;Etsy;eBay;PayPal;Venmo;Chase Bank;Bank of America;"
    "Wells Fargo;Delta;United Airlines;American Airlines;Southwest;Emirates;Lufthansa;"
    "Marriott;Hilton;Harvard;Stanford;MIT;Oxford;Cambridge;Yale;Princeton;Berkeley;NASA;"
    "FBI;UN;United Nations;WHO;BBC;CNN;NPR;YMCA;Red Cross;Peloton;Duolingo;Coursera;Udemy;"
    "LinkedIn;Twitter;Instagram;TikTok;YouTube;Reddit;Pinterest;Slack;Zoom;Dropbox;Adobe"
)

PRODUCTS = _names(
    "iPhone;iPad;MacBook;MacBook Pro;MacBook Air;iMac;Apple Watch;AirPods;Kindle;Amazon Echo;Alexa;"
    "Fire TV;Pixel;Galaxy;Chromebook;Xbox;PlayStation;PS5;Nintendo Switch;"
    "Fitbit;Garmin;GoPro;Roomba;Instant Pot;Vitamix;KitchenAid;Nespresso;Keurig;Dyson;"
    "Model 3;Model Y;Prius;Corolla;Camry;Excel;Microsoft Word;PowerPoint;Photoshop;"
    "Lightroom;Notion;Trello;Evernote;ChatGPT;Spotify Premium;Netflix Premium;Lego;Legos;"
    "Peloton Bike;Oura Ring;Kindle Paperwhite;Apple TV;Google Home;Google Nest"
)

# Brands whose next token, when it holds a digit, is a model ("iPhone 14", "Galaxy S23").
PRODUCT_LINES = _names(
    "iPhone;iPad;Pixel;Galaxy;PlayStation;Xbox;Model;Apple Watch;MacBook Pro;"
    "Kindle;Fitbit;Garmin;GoPro;Surface;Windows;macOS;iOS;Android;Nintendo Switch"
)

FIRST_NAMES = _names(
    "James;John;Robert;Michael;William;David;Richard;Joseph;Thomas;Charles;Daniel;Matthew;"
    "Anthony;Mark;Steven;Paul;Andrew;Joshua;Kevin;Brian;George;Timothy;Ryan;Jacob;Gary;"
    "Nicholas;Eric;Jonathan;Justin;Brandon;Samuel;Benjamin;Alex;Alexander;Tom;Tim;Sam;Ben;"
    "Jack;Luke;Max;Noah;Liam;Ethan;Lucas;Oliver;Henry;Leo;Adam;Peter;Chris;Mike;Dave;Jake;"
    "Mary;Patricia;Jennifer;Linda;Elizabeth;Barbara;Susan;Jessica;Sarah;Karen;Lisa;Nancy;"
    "Betty;Sandra;Ashley;Emily;Donna;Michelle;Carol;Amanda;Melissa;Deborah;Stephanie;Rebecca;"
    "Laura;Sharon;Cynthia;Kathleen;Amy;Anna;Emma;Olivia;Sophia;Isabella;Mia;Charlotte;Amelia;"
    "Harper;Evelyn;Abigail;Ella;Grace;Chloe;Lily;Hannah;Rachel;Megan;Lauren;Julia;Kate;Katie;"
    "Jenny;Jess;Lucy;Sophie;Zoe;Zoë;Maria;José;Juan;Carlos;Luis;Miguel;Sofia;Lucía;Ana;"
    "Pedro;Pablo;Diego;Mateo;François;Renée;Chloé;Björn;Søren;Jürgen;Müller;Ingrid;Astrid;"
    "Priya;Raj;Arjun;Aisha;Fatima;Mohammed;Muhammad;Ali;Omar;Yuki;Hiro;Kenji;Mei;Wei;Li;"
    "Jin;Min;Ji-woo;Seo-yeon;Nikolai;Ivan;Olga;Dmitri;Anya;Tanya;Kofi;Amara;Chidi;Ngozi"
)

# Words right before a name that say what it is ("Dr. Patel", "Mount Fuji", "my friend Ana").
PERSON_TITLES = _names("Mr;Mrs;Ms;Miss;Dr;Prof;Professor;Aunt;Uncle;Grandma;Grandpa;Coach")
PERSON_CUES = frozenset(
    "friend sister brother mom mum dad mother father wife husband partner girlfriend boyfriend "
    "colleague coworker co-worker boss manager cousin aunt uncle son daughter niece nephew "
    "neighbor neighbour roommate grandma grandpa grandmother grandfather doctor therapist "
    "teacher tutor coach trainer mentor classmate fiancé fiancée fiance fiancee".split()
)
PLACE_CUES = frozenset(
    "in near visited visiting visit from to trip flight flew traveled travelled moved drove "
    "live lived living".split()
)
# Cue words that only say "place" when the word before them says "movement" ("trip to X").
PLACE_CUES_NEED_VERB = frozenset({"to", "from"})
PLACE_VERBS = frozenset(
    "trip flight flew traveled travelled moved drove went going go back way visit road".split()
)

ORG_SUFFIXES = _names(
    "Inc;Corp;Corporation;LLC;Ltd;Co;Company;Group;University;College;School;Academy;Bank;"
    "Airlines;Airways;Hospital;Clinic;Foundation;Institute;Association;Club;Society;Agency;"
    "Studios;Labs;Library;Restaurant;Cafe;Café;Bakery;Gym;Store;Shop;Market;Hotel;Church;"
    "Museum;Theater;Theatre;Center;Centre"
)
PLACE_SUFFIXES = _names(
    "Street;St;Avenue;Ave;Road;Rd;Boulevard;Blvd;Lane;Park;Lake;River;Mountain;Mountains;"
    "Beach;Island;Islands;Bay;Valley;City;County;Square;Canyon;Falls;Airport;Station;Coast;"
    "Hills;Forest;Desert;Harbor;Harbour;Village;Province;State;Tower;Bridge;Castle;Palace;"
    "Cathedral;Temple;Trail;Pier;Market Square;Gardens"
)
PLACE_PREFIXES = _names("Mount;Mt;Lake;Lago;Cape;Port;Fort;Saint;San;Santa;Los;Las;Isle")
